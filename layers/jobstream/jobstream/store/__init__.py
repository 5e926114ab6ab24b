"""DynamoDB access: the only user of the table."""
