import HawserCore

// AFURLSessionManager's `set…Block:` blocks: one table of blocks behind one lock, and the
// manager's block properties, each one reading and writing its slot through the same accessor.
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// What to do with a data task once its response head arrived (NSURLSessionResponseDisposition).
public enum ResponseDisposition: Sendable, Hashable {
    /// Go on receiving the body.
    case allow
    /// Cancel the task (it completes with `.cancelled`).
    case cancel
    /// Continue as a download task: the body goes to a file (see
    /// ``SessionManager/dataTaskDidBecomeDownloadTask``); the data task's completion handler is
    /// called for the download task, with the file URL the manager's
    /// ``SessionManager/downloadTaskDidFinishDownloading`` block chose.
    case becomeDownload
}

/// The callback blocks of a manager (AFURLSessionManager's `set…Block:` methods), behind one lock
/// (`ManagerCore.hooks`). Each stored property is one block, listed in `table` with its role;
/// the manager's public block properties read and write them through
/// `SessionManager.block(_:)` and `SessionManager.setBlock(_:_:)`.
struct ManagerHooks {
    var sessionDidBecomeInvalid: (@Sendable ((any Error)?) -> Void)?
    var sessionDidReceiveAuthenticationChallenge: (@Sendable (AuthenticationChallenge) -> ChallengeDisposition)?
    var taskNeedNewBodyStream: (@Sendable (SessionTask) -> RequestBody?)?
    var taskWillPerformHTTPRedirection:
        (@Sendable (SessionTask, HawserResponse, HTTPClientRequest) -> HTTPClientRequest?)?
    var taskDidReceiveAuthenticationChallenge:
        (@Sendable (SessionTask, AuthenticationChallenge) -> ChallengeDisposition)?
    var taskDidSendBodyData: (@Sendable (SessionTask, Int64, Int64, Int64) -> Void)?
    var taskDidComplete: (@Sendable (SessionTask, (any Error)?) -> Void)?
    var taskDidFinishCollectingMetrics: (@Sendable (SessionTask, TaskMetrics) -> Void)?
    var dataTaskDidReceiveResponse: (@Sendable (DataTask, HawserResponse) -> ResponseDisposition)?
    var dataTaskDidBecomeDownloadTask: (@Sendable (DataTask, DownloadTask) -> Void)?
    var dataTaskDidReceiveData: (@Sendable (DataTask, Data) -> Void)?
    var dataTaskWillCacheResponse: (@Sendable (DataTask, HawserResponse) -> Bool)?
    var downloadTaskDidFinishDownloading: (@Sendable (DownloadTask, URL) -> URL?)?
    var downloadTaskDidWriteData: (@Sendable (DownloadTask, Int64, Int64, Int64) -> Void)?
    var downloadTaskDidResume: (@Sendable (DownloadTask, Int64, Int64) -> Void)?

    /// How the manager reaches a block.
    enum Role: Sendable {
        /// Observe-only: called through the block adapter (`BlockMonitor`) on the event channel,
        /// which the adapter joins while one of these is set.
        case observed
        /// Asked for a decision where the step is decided (the task delegate, the challenge
        /// handlers), read from the blocks there.
        case asked
    }

    /// One row of `table`: a block's slot and how the manager reaches it.
    struct Row: Sendable {
        let slot: any PartialKeyPath<ManagerHooks> & Sendable
        let role: Role
        let isSet: @Sendable (ManagerHooks) -> Bool

        init<Block>(_ slot: any WritableKeyPath<ManagerHooks, Block?> & Sendable, _ role: Role) {
            self.slot = slot
            self.role = role
            self.isSet = { $0[keyPath: slot] != nil }
        }
    }

    /// Every block with its role: the one list `observes` is computed from. Each stored
    /// property above must have its row (ManagerBlocksTests checks it with `Mirror`).
    static let table: [Row] = [
        Row(\.sessionDidBecomeInvalid, .observed),
        Row(\.sessionDidReceiveAuthenticationChallenge, .asked),
        Row(\.taskNeedNewBodyStream, .asked),
        Row(\.taskWillPerformHTTPRedirection, .asked),
        Row(\.taskDidReceiveAuthenticationChallenge, .asked),
        Row(\.taskDidSendBodyData, .observed),
        Row(\.taskDidComplete, .observed),
        Row(\.taskDidFinishCollectingMetrics, .observed),
        Row(\.dataTaskDidReceiveResponse, .asked),
        Row(\.dataTaskDidBecomeDownloadTask, .observed),
        Row(\.dataTaskDidReceiveData, .observed),
        Row(\.dataTaskWillCacheResponse, .asked),
        Row(\.downloadTaskDidFinishDownloading, .asked),
        Row(\.downloadTaskDidWriteData, .observed),
        Row(\.downloadTaskDidResume, .observed),
    ]

    /// Whether an observe-only block is set (then the block adapter joins the event channel).
    /// Computed when a block is set, never per request.
    var observes: Bool {
        Self.table.contains { $0.role == .observed && $0.isSet(self) }
    }
}

extension SessionManager {
    /// A block of the table, read under its lock.
    func block<Block>(_ slot: KeyPath<ManagerHooks, Block?>) -> Block? {
        self.hooks.withLock { $0[keyPath: slot] }
    }

    /// Sets a block of the table and, under the same lock (so concurrent setters leave the
    /// flags as the last write says), the flags derived from the table: the block adapter in the
    /// event channel while an observe-only block is set, and the response flag read on every
    /// response head. The only writer of the blocks: a block added to the table is covered.
    func setBlock<Block>(_ slot: WritableKeyPath<ManagerHooks, Block?>, _ block: Block?) {
        self.hooks.withLock { hooks in
            hooks[keyPath: slot] = block
            self.core.responseBlockSet.store(hooks.dataTaskDidReceiveResponse != nil, ordering: .releasing)
            self.channel.setBlocks(hooks.observes ? self.blockMonitor : nil)
        }
    }

    // MARK: - Blocks

    /// Called once the session was invalidated and its tasks ended (URLSession:didBecomeInvalidWithError:).
    public var sessionDidBecomeInvalid: (@Sendable ((any Error)?) -> Void)? {
        get { self.block(\.sessionDidBecomeInvalid) }
        set { self.setBlock(\.sessionDidBecomeInvalid, newValue) }
    }
    /// Answers the challenges no task-level block answered: the server's TLS chain and, once the
    /// engine asks, 401/407 (URLSession:didReceiveChallenge:completionHandler:). Return the
    /// disposition; `.useCredential(_:)` carries the credential. With this block set, the
    /// ``securityPolicy`` is not consulted: the block decides. Called on the event loop: be quick.
    public var sessionDidReceiveAuthenticationChallenge: (@Sendable (AuthenticationChallenge) -> ChallengeDisposition)?
    {
        get { self.block(\.sessionDidReceiveAuthenticationChallenge) }
        set { self.setBlock(\.sessionDidReceiveAuthenticationChallenge, newValue) }
    }
    /// Gives a fresh body when a 307/308 redirect must send a streamed body again
    /// (URLSession:task:needNewBodyStream:); nil fails the task. Without the block, a multipart
    /// POST's form is produced again; any other stream cannot be replayed and the task fails.
    public var taskNeedNewBodyStream: (@Sendable (SessionTask) -> RequestBody?)? {
        get { self.block(\.taskNeedNewBodyStream) }
        set { self.setBlock(\.taskNeedNewBodyStream, newValue) }
    }
    /// Decides a redirect (URLSession:task:willPerformHTTPRedirection:newRequest:): given the
    /// task, the 3xx response (its `url` the URL that redirected) and the request the engine
    /// would send, return that request, a changed one, or nil to stop: then the 3xx response is
    /// the task's response. Called on the event loop: be quick.
    public var taskWillPerformHTTPRedirection:
        (@Sendable (SessionTask, HawserResponse, HTTPClientRequest) -> HTTPClientRequest?)?
    {
        get { self.block(\.taskWillPerformHTTPRedirection) }
        set { self.setBlock(\.taskWillPerformHTTPRedirection, newValue) }
    }
    /// Answers a task's challenges (URLSession:task:didReceiveChallenge:completionHandler:): the
    /// server's TLS chain on a connection opened for the task, and 401/407 once the engine asks.
    /// Return the disposition; `.useCredential(_:)` carries the credential, and
    /// `.performDefaultHandling` hands the challenge on to ``sessionDidReceiveAuthenticationChallenge``
    /// or, without it, to the ``securityPolicy`` (server trust) or the engine. With this block set,
    /// the policy is not consulted unless the block defers. Called on the event loop: be quick.
    public var taskDidReceiveAuthenticationChallenge:
        (@Sendable (SessionTask, AuthenticationChallenge) -> ChallengeDisposition)?
    {
        get { self.block(\.taskDidReceiveAuthenticationChallenge) }
        set { self.setBlock(\.taskDidReceiveAuthenticationChallenge, newValue) }
    }
    /// Upload progress: (task, bytes sent now, total sent, total expected or -1).
    public var taskDidSendBodyData: (@Sendable (SessionTask, Int64, Int64, Int64) -> Void)? {
        get { self.block(\.taskDidSendBodyData) }
        set { self.setBlock(\.taskDidSendBodyData, newValue) }
    }
    /// A task completed, before its completion handler (URLSession:task:didCompleteWithError:).
    /// Called where the task completed (usually the event loop): be quick.
    public var taskDidComplete: (@Sendable (SessionTask, (any Error)?) -> Void)? {
        get { self.block(\.taskDidComplete) }
        set { self.setBlock(\.taskDidComplete, newValue) }
    }
    /// A task's metrics are final (URLSession:task:didFinishCollectingMetrics:), before didComplete.
    public var taskDidFinishCollectingMetrics: (@Sendable (SessionTask, TaskMetrics) -> Void)? {
        get { self.block(\.taskDidFinishCollectingMetrics) }
        set { self.setBlock(\.taskDidFinishCollectingMetrics, newValue) }
    }
    /// A data task's response head arrived: allow, cancel, or become a download.
    public var dataTaskDidReceiveResponse: (@Sendable (DataTask, HawserResponse) -> ResponseDisposition)? {
        get { self.block(\.dataTaskDidReceiveResponse) }
        set { self.setBlock(\.dataTaskDidReceiveResponse, newValue) }
    }
    /// A data task became a download task (after ``ResponseDisposition/becomeDownload``).
    public var dataTaskDidBecomeDownloadTask: (@Sendable (DataTask, DownloadTask) -> Void)? {
        get { self.block(\.dataTaskDidBecomeDownloadTask) }
        set { self.setBlock(\.dataTaskDidBecomeDownloadTask, newValue) }
    }
    /// A data task received body bytes (a copy; setting this block costs one copy per chunk).
    public var dataTaskDidReceiveData: (@Sendable (DataTask, Data) -> Void)? {
        get { self.block(\.dataTaskDidReceiveData) }
        set { self.setBlock(\.dataTaskDidReceiveData, newValue) }
    }
    /// Whether a response may be stored in the session's HTTP cache
    /// (URLSession:dataTask:willCacheResponse:; false = do not store). Called only when the
    /// configuration has a `urlCache` and the response is storable.
    public var dataTaskWillCacheResponse: (@Sendable (DataTask, HawserResponse) -> Bool)? {
        get { self.block(\.dataTaskWillCacheResponse) }
        set { self.setBlock(\.dataTaskWillCacheResponse, newValue) }
    }
    /// Where to move a finished download (given the temporary file); takes precedence over the
    /// task's destination when it returns a URL. Called on the completion queue (or in the
    /// awaiting task), before the completion handler.
    public var downloadTaskDidFinishDownloading: (@Sendable (DownloadTask, URL) -> URL?)? {
        get { self.block(\.downloadTaskDidFinishDownloading) }
        set { self.setBlock(\.downloadTaskDidFinishDownloading, newValue) }
    }
    /// Download progress: (task, bytes written now, total written, total expected or -1).
    public var downloadTaskDidWriteData: (@Sendable (DownloadTask, Int64, Int64, Int64) -> Void)? {
        get { self.block(\.downloadTaskDidWriteData) }
        set { self.setBlock(\.downloadTaskDidWriteData, newValue) }
    }
    /// A download resumed: (task, file offset it continues from, expected total or -1). A server
    /// that ignored Range gives offset 0.
    public var downloadTaskDidResume: (@Sendable (DownloadTask, Int64, Int64) -> Void)? {
        get { self.block(\.downloadTaskDidResume) }
        set { self.setBlock(\.downloadTaskDidResume, newValue) }
    }
}
