"""Analyses of a trace, pure data (pandas), no views and no TensorFlow run: predicted placement
(``predict/``), findings (``findings/``), ``compare``, copies, resources, expectations, summaries."""
