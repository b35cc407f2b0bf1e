"""Search: the sealed index of a tenant's texts, and the query, ranking and answer."""
