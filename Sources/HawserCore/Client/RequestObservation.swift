// What watches one task (instrumentation, a logger) and what it is told about: why the next
// exchange starts, how many started, the last final status. One optional value per task: a task
// nobody watches checks this optional and nothing else.
import HawserBase
import HawserHTTP1
import HawserPosix

struct RequestObservation {
    let observer: any RequestObserver
    /// Why the next exchange starts.
    var nextExchange: ExchangeReason = .initial
    /// How many exchanges started.
    private var exchangeCount = 0
    /// The last final status received.
    private var lastStatus: Int?

    init(_ observer: any RequestObserver) {
        self.observer = observer
    }

    /// Tells the observer a head is going out (`reused`: on a connection that carried others).
    mutating func exchangeStarted(
        request: HTTPClientRequest,
        prepared: Session.Prepared,
        remoteAddress: SocketAddress?,
        reused: Bool
    ) {
        self.observer.exchangeStarted(
            ExchangeInfo(
                reason: self.nextExchange,
                resendCount: self.exchangeCount,
                request: request,
                wireHead: prepared.head,
                remoteAddress: remoteAddress,
                reusedConnection: reused,
                cookiesLeftOut: prepared.cookiesLeftOut
            )
        )
        self.exchangeCount += 1
    }

    /// Tells the observer a final head arrived.
    mutating func receivedHead(_ head: HTTPResponseHead) {
        self.lastStatus = head.status
        self.observer.receivedHead(head)
    }

    /// Tells the observer the task ended.
    func completed(_ result: Result<HTTPHeaders?, HawserError>, metrics: TaskMetrics) {
        switch result {
        case .success: self.observer.completed(error: nil, status: self.lastStatus, metrics: metrics)
        case .failure(let e): self.observer.completed(error: e, status: self.lastStatus, metrics: metrics)
        }
    }
}
