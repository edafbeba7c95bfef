"""The incident simulator: a disaggregated SGLang cluster with the incident's bug, written out as
a case folder with its ground truth."""
