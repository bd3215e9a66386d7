"""Placement checks where teams test and train: :func:`.assertion.assert_placement` (also
``tfplace_widget.assert_placement``), its ``PlacementAssertionError`` (with the other errors, in
``_model/errors.py``), and the
``tfplace`` pytest plugin (:mod:`.plugin`, registered through the ``pytest11`` entry point).

Light on import, as a pytest plugin must be (pytest loads it in every run where the package is
installed): pandas and TensorFlow come with the first check.
"""

from .assertion import assert_placement

__all__ = ["assert_placement"]
