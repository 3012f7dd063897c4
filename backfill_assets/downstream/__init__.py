"""The builds of the tables downstream of the event days, which the steps call (their
definitions: ``defs/downstream/`` and ``defs/enrichment/``): customer LTV (``customer_ltv``), the
monthly report (``monthly_revenue``), the orders enriched with their customer's segment
(``enriched_orders``), and their checks' outcomes per partition (``downstream_outcomes``).
"""
