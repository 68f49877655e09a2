import HawserCore

// AFURLSessionManager's `set…Block:` blocks: the manager's block properties and the hooks they
// are kept in.
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

/// The callback blocks of a manager (AFURLSessionManager's `set…Block:` methods).
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

    /// Whether an observe-only block is set (then the block adapter joins the event channel).
    var observes: Bool {
        self.sessionDidBecomeInvalid != nil || self.taskDidSendBodyData != nil || self.taskDidComplete != nil
            || self.taskDidFinishCollectingMetrics != nil || self.dataTaskDidBecomeDownloadTask != nil
            || self.dataTaskDidReceiveData != nil || self.downloadTaskDidWriteData != nil
            || self.downloadTaskDidResume != nil
    }
}

extension SessionManager {
    func refreshBlockMonitor() {
        let observes = self.hooks.withLock { $0.observes }
        self.channel.setBlocks(observes ? self.blockMonitor : nil)
    }

    // MARK: - Blocks

    /// Called once the session was invalidated and its tasks ended (URLSession:didBecomeInvalidWithError:).
    public var sessionDidBecomeInvalid: (@Sendable ((any Error)?) -> Void)? {
        get { self.hooks.withLock { $0.sessionDidBecomeInvalid } }
        set {
            self.hooks.withLock { $0.sessionDidBecomeInvalid = newValue }
            self.refreshBlockMonitor()
        }
    }
    /// Answers the challenges no task-level block answered: the server's TLS chain and, once the
    /// engine asks, 401/407 (URLSession:didReceiveChallenge:completionHandler:). Return the
    /// disposition; `.useCredential(_:)` carries the credential. With this block set, the
    /// ``securityPolicy`` is not consulted: the block decides. Called on the event loop: be quick.
    public var sessionDidReceiveAuthenticationChallenge: (@Sendable (AuthenticationChallenge) -> ChallengeDisposition)?
    {
        get { self.hooks.withLock { $0.sessionDidReceiveAuthenticationChallenge } }
        set { self.hooks.withLock { $0.sessionDidReceiveAuthenticationChallenge = newValue } }
    }
    /// Gives a fresh body when a 307/308 redirect must send a streamed body again
    /// (URLSession:task:needNewBodyStream:); nil fails the task. Without the block, a multipart
    /// POST's form is produced again; any other stream cannot be replayed and the task fails.
    public var taskNeedNewBodyStream: (@Sendable (SessionTask) -> RequestBody?)? {
        get { self.hooks.withLock { $0.taskNeedNewBodyStream } }
        set { self.hooks.withLock { $0.taskNeedNewBodyStream = newValue } }
    }
    /// Decides a redirect (URLSession:task:willPerformHTTPRedirection:newRequest:): given the
    /// task, the 3xx response (its `url` the URL that redirected) and the request the engine
    /// would send, return that request, a changed one, or nil to stop: then the 3xx response is
    /// the task's response. Called on the event loop: be quick.
    public var taskWillPerformHTTPRedirection:
        (@Sendable (SessionTask, HawserResponse, HTTPClientRequest) -> HTTPClientRequest?)?
    {
        get { self.hooks.withLock { $0.taskWillPerformHTTPRedirection } }
        set { self.hooks.withLock { $0.taskWillPerformHTTPRedirection = newValue } }
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
        get { self.hooks.withLock { $0.taskDidReceiveAuthenticationChallenge } }
        set { self.hooks.withLock { $0.taskDidReceiveAuthenticationChallenge = newValue } }
    }
    /// Upload progress: (task, bytes sent now, total sent, total expected or -1).
    public var taskDidSendBodyData: (@Sendable (SessionTask, Int64, Int64, Int64) -> Void)? {
        get { self.hooks.withLock { $0.taskDidSendBodyData } }
        set {
            self.hooks.withLock { $0.taskDidSendBodyData = newValue }
            self.refreshBlockMonitor()
        }
    }
    /// A task completed, before its completion handler (URLSession:task:didCompleteWithError:).
    /// Called where the task completed (usually the event loop): be quick.
    public var taskDidComplete: (@Sendable (SessionTask, (any Error)?) -> Void)? {
        get { self.hooks.withLock { $0.taskDidComplete } }
        set {
            self.hooks.withLock { $0.taskDidComplete = newValue }
            self.refreshBlockMonitor()
        }
    }
    /// A task's metrics are final (URLSession:task:didFinishCollectingMetrics:), before didComplete.
    public var taskDidFinishCollectingMetrics: (@Sendable (SessionTask, TaskMetrics) -> Void)? {
        get { self.hooks.withLock { $0.taskDidFinishCollectingMetrics } }
        set {
            self.hooks.withLock { $0.taskDidFinishCollectingMetrics = newValue }
            self.refreshBlockMonitor()
        }
    }
    /// A data task's response head arrived: allow, cancel, or become a download.
    public var dataTaskDidReceiveResponse: (@Sendable (DataTask, HawserResponse) -> ResponseDisposition)? {
        get { self.hooks.withLock { $0.dataTaskDidReceiveResponse } }
        set {
            self.hooks.withLock { $0.dataTaskDidReceiveResponse = newValue }
            self.core.responseBlockSet.store(newValue != nil, ordering: .releasing)
        }
    }
    /// A data task became a download task (after ``ResponseDisposition/becomeDownload``).
    public var dataTaskDidBecomeDownloadTask: (@Sendable (DataTask, DownloadTask) -> Void)? {
        get { self.hooks.withLock { $0.dataTaskDidBecomeDownloadTask } }
        set {
            self.hooks.withLock { $0.dataTaskDidBecomeDownloadTask = newValue }
            self.refreshBlockMonitor()
        }
    }
    /// A data task received body bytes (a copy; setting this block costs one copy per chunk).
    public var dataTaskDidReceiveData: (@Sendable (DataTask, Data) -> Void)? {
        get { self.hooks.withLock { $0.dataTaskDidReceiveData } }
        set {
            self.hooks.withLock { $0.dataTaskDidReceiveData = newValue }
            self.refreshBlockMonitor()
        }
    }
    /// Whether a response may be stored in the session's HTTP cache
    /// (URLSession:dataTask:willCacheResponse:; false = do not store). Called only when the
    /// configuration has a `urlCache` and the response is storable.
    public var dataTaskWillCacheResponse: (@Sendable (DataTask, HawserResponse) -> Bool)? {
        get { self.hooks.withLock { $0.dataTaskWillCacheResponse } }
        set { self.hooks.withLock { $0.dataTaskWillCacheResponse = newValue } }
    }
    /// Where to move a finished download (given the temporary file); takes precedence over the
    /// task's destination when it returns a URL. Called on the completion queue (or in the
    /// awaiting task), before the completion handler.
    public var downloadTaskDidFinishDownloading: (@Sendable (DownloadTask, URL) -> URL?)? {
        get { self.hooks.withLock { $0.downloadTaskDidFinishDownloading } }
        set { self.hooks.withLock { $0.downloadTaskDidFinishDownloading = newValue } }
    }
    /// Download progress: (task, bytes written now, total written, total expected or -1).
    public var downloadTaskDidWriteData: (@Sendable (DownloadTask, Int64, Int64, Int64) -> Void)? {
        get { self.hooks.withLock { $0.downloadTaskDidWriteData } }
        set {
            self.hooks.withLock { $0.downloadTaskDidWriteData = newValue }
            self.refreshBlockMonitor()
        }
    }
    /// A download resumed: (task, file offset it continues from, expected total or -1). A server
    /// that ignored Range gives offset 0.
    public var downloadTaskDidResume: (@Sendable (DownloadTask, Int64, Int64) -> Void)? {
        get { self.hooks.withLock { $0.downloadTaskDidResume } }
        set {
            self.hooks.withLock { $0.downloadTaskDidResume = newValue }
            self.refreshBlockMonitor()
        }
    }
}
