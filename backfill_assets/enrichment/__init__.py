"""Customer segments from an HTTP service: the service the project ships (``service``), the
one client every run and process calls it through (``client``), and the lake table that caches
its answers (``cache``). The step that enriches the staging orders with them is built in
``downstream/enriched_orders.py`` (above the publishing protocol it walks)."""
