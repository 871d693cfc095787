"""The runtime API's chat resources (what a bot calls), one module per noun."""
