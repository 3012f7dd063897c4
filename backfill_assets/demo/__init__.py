"""The demo's own machinery, apart from the product: the generated feed (``generate``) and the
SeaweedFS S3 server the demo and the tests start on 127.0.0.1 (``local_s3``)."""
