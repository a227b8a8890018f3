"""Triton kernels (quantize.py, attention.py) and their launchers; registered as ops in flamia.ops."""
