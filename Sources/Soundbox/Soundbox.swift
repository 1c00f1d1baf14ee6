/// The version of soundboxd and soundboxctl.
public let soundboxVersion = "0.1.0"
