"""The event-day builds: staging and fact of a range of event days, and their audits.

``defs/event_days/`` declares the one step that publishes both layers (its package docstring
says why one step); this package computes them: ``staging`` (valid orders of the arrival window,
deduplicated, in USD), ``fact`` (daily revenue from the published staging), ``outcomes`` (the
contract's checks on each day) and ``quality`` (the warning checks' bands). It never imports
``defs/``.
"""
