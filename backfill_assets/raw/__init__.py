"""The raw builds the steps call (their definitions: ``defs/raw/``): what landed, verbatim, one
Delta partition per arrival date (``raw_orders``, with the quarantine) or rate date
(``raw_fx_rates``), proven against the landing files before it is published (``raw_outcomes``).
"""
