// Hawser: the AFNetworking layer on the HawserCore engine.
//
// The session manager, serializers, security policy and reachability arrive with their own
// issue; for now this module re-exports the engine so `import Hawser` gives the whole client.
@_exported import HawserCore
