// HawserCore is the engine's client (Session, tasks, connections, pool) and the one import an
// application needs: it re-exports the modules below it, whose types its API uses throughout.
@_exported import HawserAuth
@_exported import HawserBase
@_exported import HawserCache
@_exported import HawserCoding
@_exported import HawserCookies
@_exported import HawserHTTP1
@_exported import HawserPosix
@_exported import HawserProxy
@_exported import HawserTLS
