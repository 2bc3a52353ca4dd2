"""Pure domain rules: no I/O, no storage, no models. Everything here is a function of its inputs."""
