"""Runlet's Python runtime: serves the functions of one user module over HTTP/1.1 (see ../PROTOCOL.md)."""
