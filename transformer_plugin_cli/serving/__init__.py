"""Serving a trained model outside fairseq: the CTranslate2 export and its translator."""
