"""dualtrace subpackage."""
