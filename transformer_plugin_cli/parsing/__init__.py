"""Constituency parsing (Section 6.3): Penn Treebank trees, their linearisation, EVALB scoring."""
