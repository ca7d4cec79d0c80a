"""Fault injection and the loss/duplicate audit."""
