"""perfgate: a CI performance-regression gate for deep-learning training and inference."""

__version__ = "0.1.0"

__all__ = ["__version__"]
