// Hawser: the AFNetworking layer on the HawserCore engine.
//
// The module re-exports the engine, so `import Hawser` gives the whole client: the session
// manager and its serializers here, `Session` and the engine's types from HawserCore, and the
// route monitor under `NetworkReachabilityManager` from HawserReachability.
@_exported import HawserCore
@_exported import HawserReachability
