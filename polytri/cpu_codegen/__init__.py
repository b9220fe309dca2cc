"""C/OpenMP code generation, building and calling."""
