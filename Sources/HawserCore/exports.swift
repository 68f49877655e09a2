// The engine's API uses the parser's value types (heads, headers, methods) throughout.
@_exported import HawserHTTP1
