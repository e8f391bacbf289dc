"""Generated from protos/xds_control/admin/v1/admin.proto by ``make protos``: do not edit."""
