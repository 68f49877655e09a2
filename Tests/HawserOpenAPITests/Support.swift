@_exported import HawserTestSupport
import Testing

/// Suites that open sockets nest in here: serialized, so one test's descriptor count never sees
/// another test's sockets.
@Suite(.serialized) enum NetworkTests {}
