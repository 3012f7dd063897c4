"""The immutable landing zone: its layout (``layout``) and its Spark reader (``spark_reader``, whose
task on S3 is ``s3_texts``)."""
