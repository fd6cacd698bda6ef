"""Generated from rlgate's proto/ when rlgate-client was built."""
