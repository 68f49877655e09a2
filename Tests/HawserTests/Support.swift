// Shared by the AFNetworking-layer tests.
import Testing

/// Every suite that opens sockets or starts servers nests in this one, so they run one at a
/// time (the loopback servers and the file-descriptor leak checks must not interleave).
@Suite(.serialized) enum ManagerNetworkTests {}
