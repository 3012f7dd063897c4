"""``stg_orders_enriched``: staging orders with the customer's segment as of the event day, from
the customer-segment service (``backfill_assets.enrichment``) through its one shared client, its
answers cached in the lake so a re-run asks nothing again."""
