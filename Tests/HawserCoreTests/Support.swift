// The engine's tests share the helpers of HawserTestSupport (descriptor-leak checks, scripted
// servers, process fixtures, namespaces).
@_exported import HawserTestSupport
import Testing

/// Every suite that opens sockets or threads nests in here: `.serialized` applies to nested
/// suites too, so the descriptor counts of one test never see another test's sockets.
/// No test may take more than two minutes: one that waits for an event that never comes (a
/// virtual-time test whose timer was never armed) fails instead of hanging the run.
@Suite(.serialized, .timeLimit(.minutes(2))) enum NetworkTests {}
