"""What an administrator does beside the six commands: management API, interchange, keys' lifecycle, expiry, IAM."""
