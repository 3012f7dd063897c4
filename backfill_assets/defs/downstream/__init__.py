"""What sits downstream of the daily fact: customer lifetime value (a stateful daily asset built
a whole range per Spark job) and the monthly revenue report (monthly partitions)."""
