"""Host-side code: the Evaluator, padding, file reading, reports, pictures, the demo and the
CLI. It validates, batches and chooses static sizes in Python and numpy, and calls the jittable
kernels of :mod:`jaxseg._src`, which never import from here."""
