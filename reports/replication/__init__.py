"""Replication packages (issue 30): a whole study, its model runs and its report as one
Frictionless Data Package (a zip), and the import that turns it back into the same
report on another install.

- ``items``: the natural key of every item a package names, and the sha256 of each
  field of its text, so an import can tell the bank holds the very items answered;
- ``tables``: the package's CSV tables, their columns and Frictionless field types
  (one definition for the writer, the Table Schemas and the reader);
- ``reports``: the report JSON a package carries, built and normalised the same way
  at export and after import, so the two can be compared;
- ``exporting`` (``package_export``) and ``importing`` (``package_import``);
- ``readme``: the README.md written inside every package.
"""
