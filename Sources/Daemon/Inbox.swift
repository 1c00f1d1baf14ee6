import Soundbox
import SoundboxStore

/// Why a message from the broker goes no further, told the way DESIGN §2
/// fixes for its kind and step.
enum Refusal: Error, Sendable {
    /// A `rejected` receipt with the reason (a payment; a signature of any kind).
    case receipt(id: String?, String)
    /// The answer published on config/applied (already logged).
    case answer(String)
    /// A log line only: a command has no receipt of its own.
    case logged(String)
    /// Nothing to say (a retained config seen before, a cleared one).
    case nothing
}

/// One kind of message from the broker, as `Inbox` runs it: each step may
/// refuse, and the first refusal ends the message.
protocol InboxRoute: Sendable {
    associatedtype Message
    associatedtype Valid = Message
    var kind: Signature.Kind { get }
    /// 1. Read: size, JSON, shape (and what the retain flag means for this
    ///    kind); the document the signature covers, and what it says.
    func read(_ bytes: [UInt8], retained: Bool, config: Config) -> Result<(document: JSONValue, message: Message), Refusal>
    /// The id a rejected receipt carries.
    func id(_ message: Message) -> String?
    /// What the signature covers (docs/signing.md).
    func signed(_ message: Message, _ document: JSONValue) -> Result<[(String, String)], SignatureProblem>
    /// 2. Verify, once the signature is genuine: is it new (a config's ts,
    ///    a command's nonce)? Only when signing is required.
    func fresh(_ message: Message, _ envelope: Signature.Envelope, config: Config) -> Result<Message, Refusal>
    /// 3. Validate: what this device accepts.
    func validate(_ message: Message, config: Config) -> Result<Valid, Refusal>
    /// 4. Act; what to answer on config/applied, if anything.
    func act(_ valid: Valid) -> String?
}

extension InboxRoute {
    func id(_ message: Message) -> String? { nil }
    func signed(_ message: Message, _ document: JSONValue) -> Result<[(String, String)], SignatureProblem> { Signature.content(document) }
    func fresh(_ message: Message, _ envelope: Signature.Envelope, config: Config) -> Result<Message, Refusal> { .success(message) }
}

extension InboxRoute where Valid == Message {
    func validate(_ message: Message, config: Config) -> Result<Valid, Refusal> { .success(message) }
}

/// One way in for every message from the broker (DESIGN §2, docs/signing.md):
/// payments, config and commands go through the same steps in the same
/// order — read, verify (the signature, verified before anything in the
/// message is believed, then its freshness), validate, act — and a refusal
/// at any step is said once, with its reason, while the next message flows
/// on. Each kind is a route (`PaymentRoute`, `ConfigRoute`, `CommandRoute`).
struct Inbox: Sendable {
    let settings: Settings
    let signing: Signing
    let ingest: Ingest
    let payments: PaymentRoute
    let configs: ConfigRoute
    let commands: CommandRoute
    private let log = Log("mqtt")

    init(settings: Settings, storage: Storage, ingest: Ingest, scheduler: Scheduler, signing: Signing, changes: Changes,
         updater: Updater) {
        self.settings = settings; self.signing = signing; self.ingest = ingest
        payments = PaymentRoute(ingest: ingest)
        configs = ConfigRoute(settings: settings, storage: storage, changes: changes)
        commands = CommandRoute(storage: storage, ingest: ingest, scheduler: scheduler, updater: updater)
    }

    /// A message of `kind`; returns the answer for config/applied, if any.
    func receive(_ kind: Signature.Kind, _ bytes: [UInt8], retained: Bool) -> String? {
        switch kind {
        case .payment: run(payments, bytes, retained: retained)
        case .config: run(configs, bytes, retained: retained)
        case .cmd: run(commands, bytes, retained: retained)
        }
    }

    func run<Route: InboxRoute>(_ route: Route, _ bytes: [UInt8], retained: Bool) -> String? {
        let config = settings.current
        let outcome = route.read(bytes, retained: retained, config: config).flatMap { read in
            verify(route, read.message, read.document, config: config).flatMap { route.validate($0, config: config) }
        }
        switch outcome {
        case .success(let valid): return route.act(valid)
        case .failure(let refusal): return refuse(route.kind, refusal)
        }
    }

    private func verify<Route: InboxRoute>(_ route: Route, _ message: Route.Message, _ document: JSONValue,
                                           config: Config) -> Result<Route.Message, Refusal> {
        switch signing.check(route.kind, document, content: { route.signed(message, document) }, config: config) {
        case .failure(let problem): .failure(.receipt(id: route.id(message), problem.description))
        case .success(let envelope?): route.fresh(message, envelope, config: config)
        case .success(nil): .success(message)
        }
    }

    private func refuse(_ kind: Signature.Kind, _ refusal: Refusal) -> String? {
        switch refusal {
        case .receipt(let id, let reason):
            if kind != .payment { log.warning("\(kind.rawValue)_rejected", ["reason": reason]) }
            ingest.reject(id, reason, kind: kind)
            return nil
        case .answer(let text): return text
        case .logged(let reason):
            log.warning("\(kind.rawValue)_rejected", ["reason": reason])
            return nil
        case .nothing: return nil
        }
    }
}

/// The payment topic: a payment made durable (through `Ingest`) before
/// `on_message` returns, so the PUBACK leaves only once it is stored.
struct PaymentRoute: InboxRoute {
    let ingest: Ingest
    var kind: Signature.Kind { .payment }

    func read(_ bytes: [UInt8], retained: Bool, config: Config) -> Result<(document: JSONValue, message: Payment), Refusal> {
        Failpoint.hit("in_on_message")
        // Id and amount (within payment.max_amount) are validated here; Ingest does not check them again.
        switch PaymentMessage.parseKeepingDocument(bytes, maxAmount: config[.paymentMaxAmount]) {
        case .success(let (p, _)) where retained: return .failure(.receipt(id: p.id, PaymentMessage.retainedReason))
        case .success(let (p, document)): return .success((document, p))
        case .failure(let r): return .failure(.receipt(id: r.id, retained ? PaymentMessage.retainedReason : r.reason))
        }
    }
    func id(_ message: Payment) -> String? { message.id }
    func signed(_ message: Payment, _ document: JSONValue) -> Result<[(String, String)], SignatureProblem> {
        .success(Signature.paymentContent(message, document: document))
    }
    func act(_ payment: Payment) -> String? {
        _ = ingest.accept(payment)
        return nil
    }
}
