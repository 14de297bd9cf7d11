"""Bundled hardware profiles (package data: the *.h5 files beside this module)."""
