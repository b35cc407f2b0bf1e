"""The AWS clients s3memory builds itself, the table of AWS errors, and the awscrt client."""
