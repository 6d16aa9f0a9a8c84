"""Data preparation for the recipes: the synthetic pair, sentencepiece vocabularies, WMT14, Debian's
translation catalogues (the learning benchmark's corpus). The Penn Treebank's is in ../parsing/ptb.py."""
