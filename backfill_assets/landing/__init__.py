"""The immutable landing zone: its layout (``layout``) and its Spark reader (``spark_reader``)."""
