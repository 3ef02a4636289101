"""`parallelize`: a model the user already has, made parallel by composing the other subpackages in one fixed order.

On top of everything else; nothing imports it but `parallel` itself.
"""

from .parallelize import parallelize

__all__ = ["parallelize"]
