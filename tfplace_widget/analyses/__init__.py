"""Analyses of a trace: kernel facts, predicted placement, findings. Pure data (pandas), no views."""
