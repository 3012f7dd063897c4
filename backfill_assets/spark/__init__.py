"""Spark's plumbing, apart from the domain: the one session configuration (``session``), the jars
it needs and set-up fetches (``delta_jars``, ``s3a_jars``), s3a's properties for a lake on S3
(``s3a``), raw's plain-line reader compiled into the JVM (``plain_line_jar``), the driver's
class-data archive (``class_archive``), and what the project's tasks do first in Spark's Python
workers (``python_workers``)."""
