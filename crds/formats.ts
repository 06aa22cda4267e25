// TypeBox rejects a string with a `format` it has no checker for, so the formats the schemas use are
// registered here, matching what the apiserver checks for the same OpenAPI format.
import { FormatRegistry } from '@sinclair/typebox';

// RFC 3339 date-time, as the apiserver's `date-time` format requires (`new Date().toISOString()` matches).
const RFC3339_DATE_TIME = /^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$/;

if (!FormatRegistry.Has('date-time')) {
  FormatRegistry.Set('date-time', (value) => RFC3339_DATE_TIME.test(value) && !Number.isNaN(Date.parse(value)));
}
