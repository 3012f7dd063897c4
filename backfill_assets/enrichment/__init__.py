"""Customer segments from an HTTP service: the service the project ships (``service``) and the
one client every run and process calls it through (``client``)."""
