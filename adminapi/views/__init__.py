"""The admin API's endpoints, one module per noun."""
