"""Public namespace: the classic host-side ``Evaluator().add(targets, predictions)``, ``.get()``."""

from jaxseg._host.evaluator import Evaluator

__all__ = ["Evaluator"]
