"""CharToM-QA construction (paper section 4, Appendices E-J): see ``workflow`` first."""
